"""Type stubs of the native module `cwl._cwl` (see `cwl` for the overview)."""

from typing import Any, Iterable, Literal, Mapping, Optional, Sequence, Union

Shape = Literal["openai", "chat", "anthropic", "messages", "responses"]
Episodes = Literal["inferred", "delimiter"]
Message = Mapping[str, Any]
Setting = Union[str, float, int, bool, None]

__version__: str

class Report:
    """What an eviction pass did."""

    @property
    def tokens_before(self) -> int: ...
    @property
    def tokens_after(self) -> int: ...
    @property
    def budget(self) -> int: ...
    @property
    def floor(self) -> int:
        """The low-water mark a pass evicts down to."""
    @property
    def budget_met(self) -> bool: ...
    @property
    def deferred(self) -> bool:
        """The budget is missed only until the next model response."""
    @property
    def first_changed(self) -> Optional[int]:
        """Index in the view of the first message the pass changed."""
    @property
    def folded(self) -> int: ...
    @property
    def tokens_removed(self) -> int: ...
    @property
    def evicted(self) -> bool:
        """Whether the pass changed the view."""
    @property
    def warnings(self) -> list[str]: ...
    @property
    def episodes(self) -> list[dict[str, Any]]:
        """The episodes touched: name, kind, annotated, levels."""
    def to_dict(self) -> dict[str, Any]:
        """The report as `cwl evict` writes it."""

class FrozenDict(dict[str, Any]):
    """A read-only dict of a view: a message, a tool call, a content
    block. Changing it raises TypeError; `dict(m)`, `m.copy()`,
    `copy.copy`, `copy.deepcopy` and pickling give plain copies."""

class FrozenList(list[Any]):
    """A read-only list of a view (tool calls, content blocks); its
    copies are plain lists."""

class Context:
    """A conversation kept under a token budget.

    Push every message as it happens (a dict in OpenAI Chat Completions,
    Anthropic Messages or Responses shape); before each model call, send
    `view()`. Errors are `ValueError`s carrying the engine's message; a
    message refused changes nothing.

    Args:
        budget: tokens per request, tool definitions included (an int, or
            text like "80k").
        model: the model's name, for its reasoning scope.
        preset: "default" (measured refinements) or "paper" (the paper's
            Algorithm 1 exactly).
        episodes: "inferred" from tool use (as `cwl proxy`), until the
            model first calls `delimiter`; or "delimiter" only (the
            `delimiter` tool is then counted among the tools).
        shape: the shape of views; default: the first message that only
            one shape reads ("openai" until then).
        tools: the tool definitions sent with every request (any shape).
        tokenizer: "o200k" (embedded) or "estimate" (4 bytes a token).
        classes: tool name -> "bulk" or "intermediate".
        **settings: low_water, residue_share, keep_recent, superseded,
            restated, answer_share (a share like 0.8 or "80%", or "off"),
            act_outputs ("stub" or "keep"), plans ("drop" or "keep").
    """

    def __init__(
        self,
        budget: Union[int, str, None] = 80_000,
        model: Optional[str] = None,
        preset: str = "default",
        *,
        episodes: Episodes = "inferred",
        shape: Optional[Shape] = None,
        tools: Optional[Iterable[Mapping[str, Any]]] = None,
        tokenizer: Literal["o200k", "estimate"] = "o200k",
        classes: Optional[Mapping[str, str]] = None,
        **settings: Setting,
    ) -> None: ...
    def push(self, message: Message) -> list[dict[str, Any]]:
        """Appends one message; returns the results to send for its
        `delimiter` calls ({"call_id", "content", "is_error"})."""
    def extend(self, messages: Iterable[Message]) -> list[dict[str, Any]]:
        """Appends messages in order (those before a refused one stay); the
        pushes run without the GIL."""
    def enforce(self) -> Report:
        """Evicts until the prompt fits the budget (without the GIL: other
        threads run meanwhile)."""
    def view(self, shape: Optional[Shape] = None, enforce: bool = True) -> list[dict[str, Any]]:
        """The messages to send (enforcing the budget first by default).
        The list is new, the caller's to change; its messages are shared
        between views, so they are read-only (`FrozenDict`, with
        `FrozenList`s inside): `dict(m)` or `copy.deepcopy(m)` gives a
        copy to change."""
    def view_sources(self) -> list[Optional[int]]:
        """Per message of `view(shape="openai")`: the position of the pushed
        message it is unchanged, or None."""
    def recall(self, name: str) -> str:
        """An evicted episode's content, as the `recall` tool gives it."""
    def tools(self, shape: Optional[Shape] = None) -> list[dict[str, Any]]:
        """The tool definitions counted with every request."""
    @property
    def last_report(self) -> Optional[Report]: ...
    @property
    def tokens(self) -> int: ...
    @property
    def budget(self) -> int: ...
    @property
    def shape(self) -> str: ...
    @property
    def stats(self) -> dict[str, int]:
        """tokens, budget, pushed, view_messages, episodes,
        evicted_episodes, passes, pending_calls."""

def evict(
    messages: Union[Sequence[Message], Mapping[str, Any]],
    budget: Union[int, str, None] = 80_000,
    model: Optional[str] = None,
    preset: str = "default",
    *,
    episodes: Episodes = "delimiter",
    shape: Optional[Shape] = None,
    tools: Optional[Iterable[Mapping[str, Any]]] = None,
    tokenizer: Literal["o200k", "estimate"] = "o200k",
    classes: Optional[Mapping[str, str]] = None,
    **settings: Setting,
) -> dict[str, Any]:
    """One pass over a whole transcript, like `cwl evict`: returns
    {"messages": view, "report": Report}. `messages` may be a request
    dict with `messages`, `tools` and `model`, as `cwl evict` reads."""

def delimiter_tool(shape: Shape = "openai") -> dict[str, Any]:
    """The `delimiter` tool definition to offer the model."""

def recall_tool(shape: Shape = "openai") -> dict[str, Any]:
    """The `recall` tool definition to offer the model."""

def count_tokens(text: str, tokenizer: Literal["o200k", "estimate"] = "o200k") -> int:
    """Tokens in `text` as the engine counts them."""
