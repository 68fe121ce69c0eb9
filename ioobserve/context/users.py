"""User names of uids on the traced node."""

from __future__ import annotations

import pwd

import polars as pl

from ioobserve.data import schema as s


class UserNames:
    """uid -> login name, looked up once per uid (a uid without an entry keeps its number)."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    def name(self, uid: int) -> str:
        """The name of one uid."""
        found = self._names.get(uid)
        if found is None:
            try:
                found = pwd.getpwuid(uid).pw_name
            except KeyError:  # no passwd entry (a container's user, a deleted account)
                found = str(uid)
            self._names[uid] = found
        return found

    def frame(self, uids) -> pl.DataFrame:
        """A row per uid: uid and user."""
        uids = sorted({int(u) for u in uids})
        return pl.DataFrame({s.UID: uids, s.USER: [self.name(u) for u in uids]}, schema={s.UID: pl.UInt32, s.USER: pl.String})
