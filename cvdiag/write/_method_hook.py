"""One method of a client library's class, replaced by cvdiag's wrapper: put in once, taken
out only while it is still ours (someone who wrapped it since keeps theirs, and ours then
passes through, ``on`` being False)."""

from __future__ import annotations

from typing import Any

__all__ = ["MethodHook"]


class MethodHook:
    """The wrapper of ``owner.attr`` and what it reads on every call: whether capture is
    ``on``, whether LLM calls (``llm``) and Bedrock routes (``bedrock``) are recognised,
    and the ``original`` method it calls."""

    __slots__ = ("attr", "bedrock", "llm", "on", "original", "owner", "wrapper")

    def __init__(self, owner: type, attr: str, wrapper: Any) -> None:
        self.owner = owner
        self.attr = attr
        self.wrapper = wrapper
        self.on = False
        self.llm = False
        self.bedrock = True
        self.original: Any = owner.__dict__[attr]

    def install(self, *, llm: bool, bedrock: bool = True) -> bool:
        """Wrap the method (once); True when this call wrapped it."""
        self.llm, self.bedrock, self.on = llm, bedrock, True
        current = self.owner.__dict__[self.attr]
        if current is self.wrapper:
            return False
        self.original = current
        setattr(self.owner, self.attr, self.wrapper)
        return True

    def uninstall(self) -> None:
        """Restore the method, unless someone wrapped ours since (then ours passes through)."""
        self.on = False
        if self.owner.__dict__.get(self.attr) is self.wrapper:
            setattr(self.owner, self.attr, self.original)
