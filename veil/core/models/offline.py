"""Environment that keeps litellm, tiktoken and Hugging Face libraries off the network.

veil runs without network access (DESIGN.md "Invariants"; the project's machines reach only
package registries). litellm would otherwise fetch its model cost map from GitHub at import time,
tiktoken its BPE files from a blob store, and Hugging Face libraries their files from the hub.
:func:`prepare_offline_env` points each of them at what is installed locally. It must run before
the first ``import litellm`` (litellm reads ``LITELLM_LOCAL_MODEL_COST_MAP`` at import time), so
every veil module that uses litellm imports it through :func:`import_litellm`.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from types import ModuleType

_LOCK = threading.Lock()
_prepared = False

# Relative path of the tokenizer folder inside the litellm wheel: it holds the cl100k_base,
# o200k_base and p50k_base BPE files under the names tiktoken's cache uses (sha1 of their URL).
_LITELLM_TOKENIZERS = ("litellm_core_utils", "tokenizers")


def litellm_tokenizer_dir() -> Path | None:
    """Folder of the tiktoken files shipped inside the installed litellm wheel, or None.

    Found with :func:`importlib.util.find_spec`, which locates the package without importing it
    (importing litellm takes about a second and reads the environment this module prepares).
    """
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root).joinpath(*_LITELLM_TOKENIZERS)
        if folder.is_dir():
            return folder
    return None


def prepare_offline_env() -> dict[str, str]:
    """Set the offline variables that are not already set; idempotent and thread-safe.

    Sets, only when unset (a user's own value always wins):

    - ``LITELLM_LOCAL_MODEL_COST_MAP=True``: litellm uses the cost / context-window map bundled
      in its wheel instead of downloading it at import.
    - ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``: Hugging Face libraries read only
      their local cache.
    - ``TIKTOKEN_CACHE_DIR``: litellm's bundled tokenizer folder (see
      :func:`litellm_tokenizer_dir`), so ``tiktoken.get_encoding("cl100k_base")`` works offline.
      Left unset when litellm is not installed.

    Returns:
        The variables this call set (name -> value); empty on later calls.
    """
    global _prepared
    with _LOCK:
        if _prepared:
            return {}
        wanted = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        tokenizers = litellm_tokenizer_dir()
        if tokenizers is not None:
            wanted["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
        changed = {}
        for name, value in wanted.items():
            if not os.environ.get(name):
                os.environ[name] = value
                changed[name] = value
        _prepared = True
        return changed


def import_litellm() -> ModuleType:
    """Prepare the offline environment, then import and return litellm.

    litellm's own logging is quietened (it prints provider hints on stdout otherwise); veil
    reports provider errors itself, with keys redacted.

    Raises:
        ImportError: litellm is not installed.
    """
    prepare_offline_env()
    import litellm

    litellm.suppress_debug_info = True
    return litellm
