"""CWL: Context Window Lifecycle for LLM agents, in Python.

A deterministic, model-free context-eviction engine. Push every message of
a conversation as it happens; before each model call, send ``view()``: the
conversation under a token budget, evicted in a fixed order (an episode's
reasoning, then search output, then other tool output, then the episode,
leaving a one-line residue), every tool call with its result, user turns
kept. No model is ever called to summarise.

    >>> import cwl
    >>> context = cwl.Context(budget=80_000)
    >>> context.push({"role": "user", "content": "Find where auth happens."})
    []
    >>> messages = context.view()

Messages are dicts in OpenAI Chat Completions, Anthropic Messages or
OpenAI Responses shape; a view's are read-only (``FrozenDict``), as views
share them. ``evict()`` is the one-shot pass of ``cwl evict``.
``cwl.langchain.CwlMiddleware`` puts a LangChain v1 agent under a budget.
"""

from cwl._cwl import (
    Context,
    FrozenDict,
    FrozenList,
    Report,
    __version__,
    count_tokens,
    delimiter_tool,
    evict,
    recall_tool,
)

__all__ = [
    "Context",
    "FrozenDict",
    "FrozenList",
    "Report",
    "__version__",
    "count_tokens",
    "delimiter_tool",
    "evict",
    "recall_tool",
]
