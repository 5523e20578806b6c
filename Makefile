# robot_harness developer entry points. `demo` and `test` run `setup` first;
# setup is idempotent and fast when nothing changed.
SHELL := /bin/bash
.DEFAULT_GOAL := help
ENV := source scripts/env.sh
PYTEST_ARGS ?=

.PHONY: help setup demo test test-unit test-integration bench crash-test kill-test fleet-db fleet-up fleet-db-stop clean

help:
	@echo "make setup   venv + ROS 2 Kilted wheels + colcon build (idempotent)"
	@echo "make demo    run the inspection demo on the simulated robot (no API key)"
	@echo "make test    run the whole test suite"
	@echo "make bench   harness overhead benchmarks"
	@echo "make crash-test  SIGKILL supervisor/sim_robot/verifier across 100 missions (~12 min)"
	@echo "make kill-test   SIGKILL robot-harness up itself (sim inside, sim outside) under mission clients (~4 min)"
	@echo "make fleet-db    a PostgreSQL for a fleet's journal under runs/fleet-db (loopback; prints its URL)"
	@echo "make fleet-up NS=robot1   one robot of the fleet (simulated) on that journal, sharing config/fleet.yaml's elevator"

setup:
	@bash scripts/setup.sh

demo: setup
	@$(ENV) && robot-harness demo --require-success

test: setup
	@$(ENV) && bash scripts/run_tests.sh $(PYTEST_ARGS)

test-unit: setup
	@$(ENV) && bash scripts/run_tests.sh test/unit $(PYTEST_ARGS)

test-integration: setup
	@$(ENV) && bash scripts/run_tests.sh test/integration $(PYTEST_ARGS)

bench: setup
	@$(ENV) && python bench/overhead.py && python bench/aggregator_load.py

crash-test: setup
	@$(ENV) && python scripts/crash_test.py --missions $${MISSIONS:-100} --out runs/crash-test

kill-test: setup
	@$(ENV) && python scripts/kill_test.py --missions $${MISSIONS:-10} --out runs/kill-test-$$(date +%Y%m%d-%H%M%S)

FLEET_DB ?= runs/fleet-db

fleet-db: setup
	@$(ENV) && python -m robot_harness.pgserver start --dir $(FLEET_DB)

fleet-db-stop:
	@$(ENV) && python -m robot_harness.pgserver stop --dir $(FLEET_DB)

fleet-up:
	@test -n "$(NS)" || { echo "make fleet-up NS=robot1 (each robot its own namespace)"; exit 2; }
	@$(ENV) && url=$$(python -m robot_harness.pgserver url --dir $(FLEET_DB)) && \
	  robot-harness up --namespace $(NS) --journal "$$url" --harness-config config/fleet.yaml \
	    --planner-script config/fleet_script.yaml

clean:
	rm -rf .ws runs
