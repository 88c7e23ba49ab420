"""Prompt templates (the .txt files beside this one), shipped inside the package as `assistant.prompts_data`."""
