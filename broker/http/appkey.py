"""The aiohttp key under which routes find the broker.

Created at module level on purpose: ``web.AppKey`` names itself after the module whose top-level
code creates it, by walking the stack to a ``<module>`` frame, and finds none when it is first
created on a thread (the embedded broker), which raises.
"""

from aiohttp import web

BROKER_KEY = web.AppKey("broker", object)
CONSOLE_KEY = web.AppKey("console", object)  # the console's state (broker/http/console.py)
SHARE_GROUPS_KEY = web.AppKey("share_groups_env", object)  # the share-group pages' templates (share_groups.py)
