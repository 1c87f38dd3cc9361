from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    """The example shop: it sends order emails as pg-boss jobs."""

    name = "example_project.shop"
    label = "shop"
