"""What ``manage.py shop_demo`` needs besides the shop itself: counts, a live display, a flaky mail server."""
