"""The README's first command ends in ``manage.py shop_demo``: a short run of it tells the whole story."""

from __future__ import annotations

import os
import re
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from django_pgboss import boss
from django_pgboss.models import Job
from example_project.shop.queues import EMAILS, EMAILS_DEAD


@pytest.mark.django_db(transaction=True)
def test_the_demo_retries_dead_letters_redrives_and_says_how_to_open_the_admin(client):
    out = StringIO()
    call_command("shop_demo", "--seconds", "3", stdout=out)
    text = out.getvalue()

    assert "support fixed the address to 'grace.hopper@example.com' and redrove the email" in text
    assert "card declined for order" in text and "rolled back with its 3 jobs (0 jobs of order" in text
    emails = re.search(rf"^   {EMAILS} +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$", text, re.MULTILINE)
    completed, failed, retried, dead_lettered, waiting, redriven = map(int, emails.groups())
    # Two broken addresses: one fixed and redriven, the other's dead letter still waiting.
    assert (failed, dead_lettered, waiting, redriven) == (2, 2, 1, 1)
    assert retried >= 4 and completed >= 1
    # The lineage: the failed original, then the redriven job that went through.
    hops = re.findall(rf"^   \d\. (\S+)  {EMAILS}  (\w+), (\d) attempts?$", text, re.MULTILINE)
    # (The redriven job may need a second attempt too: the demo's mail server drops connections.)
    assert [state for _, state, _ in hops] == ["failed", "completed"]
    assert hops[0][2] == "3"  # the first attempt and two retries
    assert [j.id for j in boss.get_lineage(hops[1][0])] == [hops[0][0], hops[1][0]]
    assert len(boss.find_jobs(EMAILS_DEAD)) == 1  # the other broken address still waits

    # The monitor was asked for a pass once its window reached past the last job: the history
    # holds every job of the queue, and the wait took one line.
    created, done = map(
        int,
        re.search(rf"snapshots of {EMAILS} by the monitor: (\d+) created, (\d+) completed", text).groups(),
    )
    assert (created, done) == (Job.objects.filter(name=EMAILS).count(), completed)
    assert text.count("counts the last of them") <= 1 and "waiting for the monitor" not in text

    # Pasteable commands, with the venv's python; the database as a URL.
    python = re.escape(
        os.path.relpath(sys.executable)
        if not os.path.relpath(sys.executable).startswith("..")
        else sys.executable
    )
    for command in ("runserver 127.0.0.1:", "pgboss_work", "pgboss_monitor"):
        assert re.search(rf"^   {python} \S*manage\.py {command}", text, re.MULTILINE), command
    assert re.search(r"^Its database: DATABASE_URL=postgresql://\S+:\d+/\S+$", text, re.MULTILINE)

    password = re.search(r"as demo / (\S+)", text).group(1)
    assert get_user_model().objects.get(username="demo").check_password(password)
    lineage_url = re.search(r"lineage: http://127\.0\.0\.1:\d+(/admin/pgboss/job/\S+/lineage/)", text).group(
        1
    )
    assert client.login(username="demo", password=password)
    page = client.get(lineage_url)
    assert page.status_code == 200
    assert hops[0][0] in page.text and hops[1][0] in page.text
    charts = re.search(r"charts: +http://127\.0\.0\.1:\d+(\S+)", text).group(1)
    assert client.get(charts).status_code == 200
