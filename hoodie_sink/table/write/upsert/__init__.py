"""The parts of an upsert task (../upsert_task.py), one job each."""
