"""The two tiktoken encodings ctxsim counts with, built offline from files it ships (SPEC §5).

tiktoken normally downloads its BPE files on first use; ctxsim never lets it. The files are in
this package (`bpe/<name>.tiktoken.gz`, gzipped, `pyproject.toml` package data), each is
checked against the SHA-256 tiktoken itself expects for it (the `expected_hash` of
`tiktoken_ext/openai_public.py`), and the `tiktoken.Encoding` is built with its public
constructor from the published definition of the encoding: its name, split pattern and
special tokens (as in `tiktoken_ext/openai_public.py`; a test compares them). A file whose
hash differs is refused with `BpeFileError`, never used.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

BPE_DIR = Path(__file__).resolve().parent / "bpe"

# SHA-256 of the uncompressed files, as tiktoken publishes them.
BPE_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

_O200K_PARTS = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
)
# The published definitions (split pattern, special tokens) of the two encodings.
ENCODING_SPECS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
                   r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        "special_tokens": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258,
                           "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
                           "<|endofprompt|>": 100276},
    },
    "o200k_base": {
        "pat_str": "|".join(_O200K_PARTS),
        "special_tokens": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    },
}


class BpeFileError(RuntimeError):
    """A shipped BPE file is missing or is not the published one."""


def bpe_path(name: str) -> Path:
    return BPE_DIR / f"{name}.tiktoken.gz"


def load_bpe_file(name: str, path: Path | None = None) -> bytes:
    """The verified, uncompressed BPE file of an encoding (never the network)."""
    if name not in BPE_SHA256:
        raise ValueError(f"unknown encoding {name!r} (known: {', '.join(BPE_SHA256)})")
    path = path or bpe_path(name)
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:  # missing, unreadable or not gzip (BadGzipFile)
        raise BpeFileError(f"{path}: cannot read the {name} BPE file ({exc}); reinstall "
                           "ctxsim") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != BPE_SHA256[name]:
        raise BpeFileError(f"{path}: SHA-256 {digest} is not the published {name} hash "
                           f"{BPE_SHA256[name]}; the file was damaged or replaced, so it is "
                           "not used (reinstall ctxsim)")
    return raw


def ranks_of(data: bytes) -> dict[bytes, int]:
    """The mergeable ranks of a `.tiktoken` file: one `base64-token rank` per line."""
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@cache
def get_encoding(name: str) -> Any:
    """A `tiktoken.Encoding` built from the verified shipped file (cached per process)."""
    import tiktoken

    spec = ENCODING_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown encoding {name!r} (known: {', '.join(ENCODING_SPECS)})")
    encoding = tiktoken.Encoding(name, pat_str=spec["pat_str"],
                                 mergeable_ranks=ranks_of(load_bpe_file(name)),
                                 special_tokens=dict(spec["special_tokens"]))
    # The tokenizer has its own copy of the ranks; tiktoken keeps the Python dict only to
    # pickle the encoding, which ctxsim never does (counting workers load theirs by name).
    # Dropping it gives back ~12 MB per encoding (issue 21: an import worker's peak memory).
    encoding._mergeable_ranks = {}
    return encoding
