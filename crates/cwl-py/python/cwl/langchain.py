"""CWL for LangChain v1 agents: ``CwlMiddleware`` for ``create_agent``.

The agent's state keeps the whole history; each model call sees the CWL
view of it instead: the history under a token budget, evicted by the
engine's fixed order, every tool call with its result, user turns kept.

    from langchain.agents import create_agent
    from cwl.langchain import CwlMiddleware

    agent = create_agent(model, tools, middleware=[CwlMiddleware(budget=80_000)])

No ``SummarizationMiddleware`` is needed, or wanted: summarising asks a
model to rewrite the history once it passes a token count, which costs a
call, loses detail for good and rewrites the state, so the cached prefix
breaks each time. CWL evicts without a model, in batches down to a
low-water mark (so the prefix stays cached between passes), keeps a
one-line residue of what went, and leaves the state whole, so ``recall``
(or a later, larger budget) still has everything.

Episodes are inferred from tool use by default (``episodes="inferred"``),
as ``cwl proxy`` does. With ``episodes="delimiter"`` the middleware adds
the ``delimiter`` tool and answers its calls itself, so the model marks
its own episodes, as the CWL paper's agents do.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Awaitable, Callable, Optional

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

import cwl

__all__ = ["CwlMiddleware", "from_openai", "to_openai"]


def _text(message: BaseMessage) -> str:
    """The text of a message's content (images and other parts left out)."""
    return str(message.text)


def to_openai(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as an OpenAI Chat Completions dict, as the
    engine counts it. Parts that are not text (images) are not counted,
    though the message itself goes to the model unchanged."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": _text(message)}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": _text(message)}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": _text(message)}
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": _text(message)}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in message.tool_calls
            ]
        return out
    raise ValueError(f"cwl cannot place a {type(message).__name__} in the history")


def from_openai(message: dict[str, Any]) -> BaseMessage:
    """An OpenAI Chat Completions dict the engine wrote (a message some of
    whose content was evicted, a residue, the index line) as LangChain's."""
    role = message["role"]
    content = message.get("content") or ""
    if role == "assistant":
        calls = [
            {
                "id": call["id"],
                "name": call["function"]["name"],
                "args": _arguments(call["function"]["arguments"]),
                "type": "tool_call",
            }
            for call in message.get("tool_calls") or []
        ]
        return AIMessage(content=content, tool_calls=calls)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=message["tool_call_id"])
    if role == "user":
        return HumanMessage(content=content)
    return SystemMessage(content=content)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _key(message: BaseMessage) -> Any:
    return message.id if message.id is not None else id(message)


class _Conversation:
    """One history and its engine: `pushed[n]` is the n-th message pushed
    (None for the system prompt), `keys` identify the history's messages."""

    def __init__(self, system: Optional[str], context: cwl.Context) -> None:
        self.system = system
        self.context = context
        self.pushed: list[Optional[BaseMessage]] = []
        self.keys: list[Any] = []
        self.outcomes: dict[str, dict[str, Any]] = {}
        if system is not None:
            context.push({"role": "system", "content": system})
            self.pushed.append(None)

    def continues(self, system: Optional[str], keys: list[Any]) -> bool:
        known = len(self.keys)
        return self.system == system and known <= len(keys) and self.keys == keys[:known]

    def extend(self, messages: list[BaseMessage], keys: list[Any]) -> None:
        for message, key in zip(messages[len(self.keys) :], keys[len(self.keys) :]):
            for outcome in self.context.push(to_openai(message)):
                self.outcomes[outcome["call_id"]] = outcome
            self.pushed.append(message)
            self.keys.append(key)

    def view(self) -> list[BaseMessage]:
        dicts = self.context.view(shape="openai")
        out: list[BaseMessage] = []
        for value, source in zip(dicts, self.context.view_sources()):
            if source is not None:
                message = self.pushed[source]
                if message is not None:
                    out.append(message)
            elif value["role"] != "system":
                out.append(from_openai(value))
        return out


class CwlMiddleware(AgentMiddleware):
    """Keeps every model call of a LangChain v1 agent under a token budget
    with CWL, while the agent's state keeps the full history.

    Args:
        budget: the token budget of each model call (prompt, tool
            definitions included).
        preset: ``"default"`` (the measured refinements) or ``"paper"``
            (the CWL paper's Algorithm 1 exactly).
        episodes: ``"inferred"`` (from tool use, as ``cwl proxy`` does) or
            ``"delimiter"`` (the middleware adds the ``delimiter`` tool and
            the model marks its own episodes).
        model: the model's name, for its reasoning scope (as ``cwl evict
            --model``).
        max_conversations: histories kept in memory at once (one per
            thread the agent serves); the least recently used is dropped
            and rebuilt from the history when it comes back.
        **settings: any engine setting ``cwl.Context`` takes
            (``low_water=0.8``, ``residue_share="off"``...).
    """

    def __init__(
        self,
        budget: int = 80_000,
        *,
        preset: str = "default",
        episodes: str = "inferred",
        model: Optional[str] = None,
        max_conversations: int = 16,
        **settings: Any,
    ) -> None:
        super().__init__()
        if episodes not in ("inferred", "delimiter"):
            raise ValueError(f"unknown episodes `{episodes}`: expected `delimiter` or `inferred`")
        self._options: dict[str, Any] = dict(
            budget=budget, model=model, preset=preset, episodes=episodes, **settings
        )
        cwl.Context(**self._options)  # a bad setting fails here, not at the first call
        self.episodes = episodes
        self.max_conversations = max(1, max_conversations)
        self.tools: list[BaseTool] = [_delimiter_tool()] if episodes == "delimiter" else []
        self._conversations: list[_Conversation] = []
        self._lock = threading.Lock()

    def _conversation(
        self, system: Optional[str], messages: list[BaseMessage], tools: Optional[list[Any]]
    ) -> _Conversation:
        """The conversation `messages` continue (a new one if none does),
        brought up to date with them."""
        keys = [_key(message) for message in messages]
        found = next((c for c in self._conversations if c.continues(system, keys)), None)
        if found is None:
            definitions = [convert_to_openai_tool(tool) for tool in tools or []]
            found = _Conversation(system, cwl.Context(tools=definitions, **self._options))
        else:
            self._conversations.remove(found)
        self._conversations.insert(0, found)
        del self._conversations[self.max_conversations :]
        found.extend(messages, keys)
        return found

    def _request(self, request: ModelRequest) -> ModelRequest:
        system = request.system_message
        with self._lock:
            conversation = self._conversation(
                None if system is None else _text(system), list(request.messages), request.tools
            )
            return request.override(messages=conversation.view())

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Sends the model the CWL view of the history."""
        return handler(self._request(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        """Sends the model the CWL view of the history."""
        return await handler(self._request(request))

    def _answer(self, request: Any) -> Optional[ToolMessage]:
        """The engine's answer to a `delimiter` call, or None for any other."""
        call = request.tool_call
        if self.episodes != "delimiter" or call["name"] != _delimiter_name():
            return None
        state = request.state
        messages = state["messages"] if isinstance(state, dict) else getattr(state, "messages", [])
        with self._lock:
            keys = [_key(message) for message in messages]
            conversation = next(
                (c for c in self._conversations if c.continues(c.system, keys)), None
            )
            if conversation is None:
                conversation = self._conversation(None, list(messages), None)
            else:
                conversation.extend(list(messages), keys)
            outcome = conversation.outcomes.get(call["id"])
        if outcome is None:
            content, error = "Error: this delimiter call was not seen by the engine.", True
        else:
            content, error = outcome["content"], outcome["is_error"]
        return ToolMessage(
            content=content,
            tool_call_id=call["id"],
            name=call["name"],
            status="error" if error else "success",
        )

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Answers `delimiter` calls from the engine; runs any other tool."""
        answer = self._answer(request)
        return handler(request) if answer is None else answer

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Answers `delimiter` calls from the engine; runs any other tool."""
        answer = self._answer(request)
        return await handler(request) if answer is None else answer


def _delimiter_name() -> str:
    """The name of the delimiter tool."""
    return cwl.delimiter_tool()["function"]["name"]


def _delimiter_tool() -> BaseTool:
    spec = cwl.delimiter_tool()["function"]

    def delimiter(**_: Any) -> str:
        return "Error: delimiter calls are answered by CwlMiddleware, which did not see this one."

    return StructuredTool.from_function(
        func=delimiter,
        name=spec["name"],
        description=spec["description"],
        args_schema=spec["parameters"],
    )
