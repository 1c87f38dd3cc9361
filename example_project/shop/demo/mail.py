"""The demo's mail server: Django's in-memory backend, slow and now and then dropping a connection."""

from __future__ import annotations

import random
import threading
import time
from smtplib import SMTPServerDisconnected
from typing import Any

from django.core.mail.backends.locmem import EmailBackend


class FlakyEmailBackend(EmailBackend):
    """Like locmem (messages land in ``django.core.mail.outbox``), with latency and dropped connections.

    The first attempt at a message fails with ``SMTPServerDisconnected`` one time in
    ``FAIL_ONE_IN``; a retry of the same message (same subject) always goes through, as a real
    transient error would. Seeded, so two runs of the demo fail the same way.
    """

    FAIL_ONE_IN = 6
    _seen: set[str] = set()
    _lock = threading.Lock()
    _random = random.Random(8)

    def send_messages(self, messages: Any) -> int:
        for message in messages:
            with self._lock:
                first_try = message.subject not in self._seen
                self._seen.add(message.subject)
                drop = first_try and self._random.randrange(self.FAIL_ONE_IN) == 0
                latency = self._random.uniform(0.02, 0.12)
            time.sleep(latency)
            if drop:
                raise SMTPServerDisconnected("Connection unexpectedly closed (the demo's flaky mail server)")
        return super().send_messages(messages)
