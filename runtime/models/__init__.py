"""Model backends: outbound services of kind "model" (`local:` llama-cpp in process, `openai:`
any OpenAI-compatible endpoint). Each registers its scheme in the registry, as a plugin would."""
