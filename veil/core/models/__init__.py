"""Model access of the core: the code that reaches a model, local or served, and nothing that
decides what to do with its answers.

* :mod:`veil.core.models.embedder`: text embeddings (all-MiniLM-L6-v2 in-process, or Ollama on
  127.0.0.1) behind a durable cache by content hash; used by recall (``veil.recall``) and by
  the eviction policy's rescue of old turns.

Chat models (``veil.core.models.llm``) and token counting (``veil.core.models.tokens``) are model access too
and are to move here in a later step of issue 20.
"""
