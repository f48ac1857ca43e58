"""The read-only containers of `Context.view()` (compiled into `cwl._cwl`).

A view's messages are shared between views, so they refuse change: a
caller that changed one in place would change every later view. A copy
(`dict(m)`, `m.copy()`, `copy.copy`, `copy.deepcopy`, pickling) is a
plain, mutable `dict` or `list`; `copy.deepcopy` copies all the way down.
"""

import copy as _copy


def _refuse(self, *args, **kwargs):
    raise TypeError(
        "a message of a cwl view is read-only (shared with later views): "
        "change a copy, e.g. copy.deepcopy(message)"
    )


class FrozenDict(dict):
    """A read-only dict of a view (a message, a tool call, a content part)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self):
        return dict(self)

    def __deepcopy__(self, memo):
        return {key: _copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self):
        return (dict, (dict(self),))


class FrozenList(list):
    """A read-only list of a view (tool calls, content parts)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self):
        return list(self)

    def __deepcopy__(self, memo):
        return [_copy.deepcopy(value, memo) for value in self]

    def __reduce__(self):
        return (list, (list(self),))
