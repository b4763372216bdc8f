"""Provider types accepted in ``auth.json`` (``providers.<name>.type``), without importing litellm.

Settings validation runs at every start (``veil --help`` included) and importing litellm takes
about a second, so the names are listed here statically. Each one is a member of litellm's own
provider list (``litellm.provider_list`` / ``litellm.types.utils.LlmProviders``);
tests/test_llm.py checks that against the installed litellm so the list cannot drift.
"""

from __future__ import annotations

KNOWN_PROVIDER_TYPES: frozenset[str] = frozenset(
    {
        # Hosted APIs
        "openai",
        "anthropic",
        "openrouter",
        "gemini",
        "vertex_ai",
        "mistral",
        "codestral",
        "groq",
        "deepseek",
        "together_ai",
        "azure",
        "azure_ai",
        "bedrock",
        "cohere",
        "cohere_chat",
        "fireworks_ai",
        "xai",
        "perplexity",
        "deepinfra",
        "cerebras",
        "sambanova",
        "nvidia_nim",
        "databricks",
        "watsonx",
        "cloudflare",
        "moonshot",
        "dashscope",
        "github",
        "huggingface",
        "replicate",
        "ai21",
        "nebius",
        "novita",
        "friendliai",
        "featherless_ai",
        "lambda_ai",
        "volcengine",
        "meta_llama",
        # Local or self-hosted servers (OpenAI-compatible or their own API)
        "ollama",
        "ollama_chat",
        "lm_studio",
        "llamafile",
        "hosted_vllm",
        "vllm",
        "xinference",
        "openai_like",
        "custom_openai",
        "litellm_proxy",
        "docker_model_runner",
    }
)
"""litellm provider names allowed as ``type`` in auth.json (the prefix of litellm's model string,
e.g. ``ollama_chat/qwen3`` or ``openai/gpt-4o``)."""
