"""One mission, start to end: admission, the frozen contract, model turns, the mission's end.

``runner.MissionRunner`` runs it; ``state.MissionState`` holds it;
``ledger.MissionLedger`` is its only journal writer; ``turn.TurnExecutor``
runs one model turn's tool calls; ``operator.OperatorDesk`` asks approvals
and questions; ``progress.ProgressViews`` builds what each role sees.
"""
