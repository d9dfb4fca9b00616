"""Routing before the sink (docs/design/routing.md): a write's records tagged against one snapshot
and assigned to their file groups in tasks, then shuffled so that each file group is in exactly
one write task.  `columns.py` is the contract between the route and the sink; `tag.py` and
`inserts.py` run in the route's tasks and its driver step; `task.py` is the sink's routed task;
`checks.py` what the commit checks of a routed write."""
