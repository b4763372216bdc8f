"""Model access of the core: the code that reaches a model, local or served, and nothing that
decides what to do with its answers.

* :mod:`veil.core.models.llm`: chat models: which model answers a role (``main``, ``compact``),
  litellm providers with ``auth.json``'s routing and fallback, a local model a plugin registers
  (``register_models``), usage accounting.
* :mod:`veil.core.models.tokens`: token counting, exact where the model's tokenizer is
  installed (OpenAI, DeepSeek), an estimate otherwise; ``cl100k_base`` counts for replay.
* :mod:`veil.core.models.embedder`: text embeddings (all-MiniLM-L6-v2 in-process, or Ollama on
  127.0.0.1) behind a durable cache by content hash; used by recall (``veil.recall``) and by
  the eviction policy's rescue of old turns.
* :mod:`veil.core.models.providers`: the provider types ``auth.json`` accepts, listed without
  importing litellm.
* :mod:`veil.core.models.offline`: the environment that keeps litellm, tiktoken and Hugging
  Face libraries off the network, and litellm's lazy import.
"""
