"""How to reach a table on S3: the Hadoop S3A options a Hudi user already passes, as one object.

A Hudi job names its object store settings in Hadoop's S3A terms (`fs.s3a.endpoint`, ...), as
write/read options or Spark conf (`spark.hadoop.fs.s3a.*`).  The sink takes the same keys as
options, with or without the `spark.hadoop.` prefix.  What is not set falls back to the AWS
environment of each process, which both S3 clients read themselves: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL, and instance, container or
web-identity roles.  Only pyarrow also reads ~/.aws profiles, obstore does not: with profiles, give
the keys as options or variables (the conditional PUTs would otherwise be refused).

Two clients share these settings (storage.py): pyarrow's S3FileSystem for data files and listings,
and obstore for the one thing pyarrow cannot do, a conditional PUT (`If-None-Match: *`), which makes
claims, locks and instant files create-if-absent atomically.

Options travel inside the write's config to every Spark task, like every option: prefer the
environment (or instance roles) for secrets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from hoodie_sink.errors import HoodieConfigError

S3_SCHEMES = ("s3", "s3a", "s3n")
_PREFIXES = ("spark.hadoop.fs.s3a.", "fs.s3a.")

# Hadoop S3A key (after fs.s3a.) -> field
_KEYS = {
    "endpoint": "endpoint",
    "endpoint.region": "region",
    "access.key": "access_key",
    "secret.key": "secret_key",
    "session.token": "session_token",
    "path.style.access": "path_style",
    "connection.ssl.enabled": "ssl",
}


def is_storage_option(key: str) -> bool:
    """Whether `key` (lowercased) is an S3A option, ours to parse (or refuse)."""
    return key.startswith(_PREFIXES)


@dataclass(frozen=True)
class StorageOptions:
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    path_style: bool | None = None
    ssl: bool = True

    @staticmethod
    def from_options(options: Mapping[str, str]) -> StorageOptions:
        """The S3A keys of `options` (lowercased keys); any other `fs.s3a.*` key is refused: it
        would change how Hadoop reaches the store, and silently ignoring it could send the write
        elsewhere or with other credentials."""
        values: dict[str, Any] = {}
        for key, value in options.items():
            if not is_storage_option(key):
                continue
            name = key.removeprefix("spark.hadoop.").removeprefix("fs.s3a.")
            attr = _KEYS.get(name)
            if attr is None:
                raise HoodieConfigError(
                    f"Option '{key}' is not supported: hoodie_sink reaches S3 with "
                    f"{', '.join('fs.s3a.' + k for k in _KEYS)} (also as spark.hadoop.fs.s3a.*) and the AWS "
                    "environment (AWS_* variables, ~/.aws, instance roles). Help: remove the option."
                )
            if attr in ("path_style", "ssl"):
                v = value.strip().lower()
                if v not in ("true", "false"):
                    raise HoodieConfigError(f"Option '{key}'='{value}' is not a boolean (true or false).")
                values[attr] = v == "true"
            elif value.strip():
                values[attr] = value.strip()
        return StorageOptions(**values)

    def endpoint_url(self) -> str | None:
        """The endpoint with its scheme: S3A's endpoint may be a bare host, whose scheme then comes
        from fs.s3a.connection.ssl.enabled (Hadoop's rule).  None: the AWS environment's (or AWS)."""
        ep = self.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if not ep:
            return None
        if "://" not in ep:
            ep = ("https://" if self.ssl else "http://") + ep
        return ep.rstrip("/")

    def __repr__(self) -> str:  # never print a secret
        shown = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}
        for secret in ("secret_key", "session_token"):
            if secret in shown:
                shown[secret] = "***"
        return f"StorageOptions({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def split_s3_uri(uri: str) -> tuple[str, str] | None:
    """(bucket, key prefix) of an s3://, s3a:// or s3n:// URI; None for any other URI."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in S3_SCHEMES:
        return None
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise HoodieConfigError(f"The S3 path '{uri}' names no bucket. Help: use s3a://<bucket>/<path>.")
    return bucket, key.strip("/")


def s3_filesystem(options: StorageOptions) -> Any:
    """pyarrow's S3 filesystem for these options (the AWS environment fills in the rest)."""
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    endpoint = options.endpoint_url()
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        kwargs["endpoint_override"] = host
        kwargs["scheme"] = scheme
    if options.region:
        kwargs["region"] = options.region
    elif endpoint:
        # with an endpoint there is no AWS region lookup; S3-compatible servers accept us-east-1
        kwargs["region"] = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    if options.access_key or options.secret_key:
        if not (options.access_key and options.secret_key):
            raise HoodieConfigError(
                "Options 'fs.s3a.access.key' and 'fs.s3a.secret.key' go together: one is set without the other."
            )
        kwargs["access_key"] = options.access_key
        kwargs["secret_key"] = options.secret_key
        if options.session_token:
            kwargs["session_token"] = options.session_token
    if options.path_style is False and endpoint:
        kwargs["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**kwargs)


def s3_store(bucket: str, options: StorageOptions) -> Any:
    """obstore's S3 store of `bucket`: the conditional PUTs (create-if-absent) go through it."""
    from obstore.store import S3Store

    kwargs: dict[str, Any] = {}
    endpoint = options.endpoint_url()
    if endpoint:
        kwargs["endpoint"] = endpoint
        kwargs["virtual_hosted_style_request"] = options.path_style is False
        if endpoint.startswith("http://"):
            kwargs["client_options"] = {"allow_http": True}
    region = options.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region and endpoint:
        region = "us-east-1"
    if not region:
        # AWS signs per region: ask where the bucket is, as pyarrow's filesystem does by itself
        import pyarrow.fs as pafs

        try:
            region = pafs.resolve_s3_region(bucket)
        except OSError:
            region = None
    if region:
        kwargs["region"] = region
    if options.access_key and options.secret_key:
        kwargs["access_key_id"] = options.access_key
        kwargs["secret_access_key"] = options.secret_key
        if options.session_token:
            kwargs["session_token"] = options.session_token
    return S3Store(bucket, **kwargs)
