"""The approver inbox: server-rendered pages at ``/ui`` over the approvals service.

``sessions`` signs the session cookie, ``csrf`` guards the forms, ``access`` resolves the
signed-in approver, ``views`` shapes what the templates show, ``render`` answers pages,
``pages`` holds the routes and ``static`` the stylesheet and script.
"""

from broker.ui.access import InboxState
from broker.ui.pages import inbox_router
from broker.ui.render import template_config
from broker.ui.sessions import SessionKeys

__all__ = ["InboxState", "SessionKeys", "inbox_router", "template_config"]
