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

AMBIENT_CREDENTIAL_TYPES: frozenset[str] = frozenset(
    {
        "vertex_ai",  # Google application-default credentials (a bearer token from gcloud)
        "bedrock",  # AWS credentials from the environment (signature, session token)
        "azure",  # Azure AD tokens (AZURE_AD_TOKEN, azure identity) besides api-key
        "azure_ai",  # the same Azure identity sources
        "watsonx",  # WATSONX_TOKEN / IAM tokens from the environment
        "databricks",  # Databricks SDK authentication (profiles, OAuth) besides the token
    }
)
"""Provider types whose requests litellm may authenticate with credentials found in the
environment or a cloud SDK's configuration, not only with the provider's ``api_key``. A project
file may not give such a provider its own ``base_url`` (:mod:`veil.core.safety.trust`): a placeholder key
would not stop those credentials from going there. Every other known type authenticates with its
api key alone."""
