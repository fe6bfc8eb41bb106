"""Model providers: OpenAI-compatible chat completions, Anthropic Messages, scripted."""
