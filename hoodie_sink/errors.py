"""The error tree of hoodie_sink.

Spark shows executor errors only as text, so every message stands alone: it names the
option, column, file, table path or instant involved and, where there is one, the remedy
("Help: ...").  The type says whether a commit landed.
"""

from __future__ import annotations


class HoodieError(Exception):
    """Root of every error raised by hoodie_sink."""


class HoodieConfigError(HoodieError, ValueError):
    """An option is unknown, has a bad value, or contradicts the table's configuration."""


class HoodieSchemaError(HoodieError, ValueError):
    """The input's schema cannot be written (unsupported type, missing column, drift)."""


class HoodieKeyError(HoodieError, ValueError):
    """A record has a null or empty record key, or a key/partition field is missing."""


class HoodieTableError(HoodieError):
    """The table on storage is missing, unreadable or inconsistent (e.g. a corrupt file)."""


class HoodieCommitError(HoodieError):
    """A commit did not land. Nothing of it is visible; the write may be retried."""


class HoodieWriteConflictError(HoodieCommitError):
    """The write would change a file group that a pending clustering is rewriting, or (optimistic
    concurrency control) that another writer changed since this write began."""


class HoodieLockError(HoodieCommitError):
    """The table lock (optimistic concurrency control) could not be taken: nothing was committed."""


class HoodieCommitStateUnknown(HoodieError):
    """A commit may or may not have landed (e.g. the completed file's write failed midway).

    Never delete written files on this error: the next writer's rollback decides.
    """


class HoodieCatalogError(HoodieError):
    """A catalog (Hive metastore) call failed: the metastore is unreachable, or refused the call.

    The message names the metastore's URI and the call.  A catalog sync runs after the data
    commit, which this error never undoes.
    """
