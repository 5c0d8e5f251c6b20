"""A client for the action broker: propose actions, run a model's native tool calls, read the
route's catalog in any provider's format, check prose for claims no execution backs, and list,
approve and deny the actions that wait for a person."""

from broker_client._async import AsyncApprovals, AsyncClient
from broker_client._protocol import Retries
from broker_client._sync import Approvals, Client
from broker_client.errors import (
    AuthzError,
    BrokerError,
    IdempotencyError,
    InternalError,
    PolicyError,
    PreconditionError,
    ProviderError,
    SchemaError,
    ToolTimeoutError,
    TransportError,
    UnavailableError,
)
from broker_client.models import (
    Approval,
    ApprovalInfo,
    Audit,
    Decision,
    Execution,
    ExecutionError,
    FailedCheck,
    FieldError,
    ImpliedWriteReport,
    Tool,
    ToolCallsAnswer,
)
from broker_client.providers import assistant_turn, has_tool_calls, messages_to_append

__all__ = [
    "Approval",
    "ApprovalInfo",
    "Approvals",
    "AsyncApprovals",
    "AsyncClient",
    "Audit",
    "AuthzError",
    "BrokerError",
    "Client",
    "Decision",
    "Execution",
    "ExecutionError",
    "FailedCheck",
    "FieldError",
    "IdempotencyError",
    "ImpliedWriteReport",
    "InternalError",
    "PolicyError",
    "PreconditionError",
    "ProviderError",
    "Retries",
    "SchemaError",
    "Tool",
    "ToolCallsAnswer",
    "ToolTimeoutError",
    "TransportError",
    "UnavailableError",
    "assistant_turn",
    "has_tool_calls",
    "messages_to_append",
]
