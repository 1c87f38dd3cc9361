"""The admin's own pages, one module per page family, wired into the ModelAdmins by model_admins.py.

- throughput.py: the queue list's throughput column and the queue page's charts and range picker;
- job_actions.py: the job list's retry, cancel, resume and delete actions;
- redrive.py: the redrive action's confirmation page and result;
- lineage.py: a job's dead-letter chain;
- schedules.py: the schedule list, add and delete pages;
- common.py: the LogEntry, permission and JSON helpers they share.

Everything that changes a job or a schedule goes through ``Boss`` (the models are read-only),
checks its permission first, accepts only POST for writes (the admin's CSRF middleware guards
every POST), and leaves an admin LogEntry behind.
"""

from __future__ import annotations
