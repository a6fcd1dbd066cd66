"""The prompts of an inferring add (AGENTIC.md 6): our own wording, ml-commons' JSON contracts.

Extraction answers ``{"facts": [...]}``; the decision answers
``{"memory_decision": [{"id", "text", "event", "old_memory"?}]}``; the session
summary is plain text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

_JSON_RULE = (
    'Answer with one JSON object and nothing else: {"facts": ["...", "..."]}. '
    "Return an empty facts array when there is nothing to keep."
)

EXTRACTION = {
    "SEMANTIC": (
        "You organise what a conversation teaches about its participants. Read the conversation and list each "
        "fact as one self-contained sentence: names, relationships, work, skills, interests, plans, problems, "
        "schedules, and results the assistant confirmed. State only what was said; never speculate, never answer "
        "the user's question. " + _JSON_RULE
    ),
    "USER_PREFERENCE": (
        "You analyse user preferences. From the USER messages only, list explicit preferences, and implied ones "
        "only with a strong signal (asked for repeatedly), as well as the user's identity and goals. Each fact is "
        "one actionable sentence under 350 characters; never answer the user's question. " + _JSON_RULE
    ),
    "SUMMARY": (
        "You write summaries. Summarise the given conversation; if a previous summary is given, extend it with "
        "the new text, covering any topics or questions it raises. Never answer the user's question. " + _JSON_RULE
    ),
}

DECISION = (
    "You manage a memory store. You get old_memory (existing facts with id, text and similarity score; an id may "
    "appear more than once, consider its highest score) and retrieved_facts (new facts from a conversation). "
    "Decide for every unique old id exactly one event: NONE (keep), UPDATE (the same entity or event with more or "
    "newer detail: give the merged text and the original text as old_memory) or DELETE (contradicted by a new "
    "fact). Add each new fact that is not covered with event ADD. When in doubt, ADD. "
    'Answer with one JSON object and nothing else: {"memory_decision": [{"id": "old id or new", "text": "fact", '
    '"event": "ADD|UPDATE|DELETE|NONE", "old_memory": "original text, for UPDATE only"}]}'
)

SUMMARY_SYSTEM = (
    "You title conversations. Write a short generic summary of the conversation's topic in at most {words} words. "
    "Leave out personal data and anything the AI said. Answer with the summary text only."
)


def _messages_json(messages: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(messages), ensure_ascii=False)


def extraction_user_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    reminder = {
        "role": "user",
        "content": [{"type": "text", "text": 'Answer only with the JSON object {"facts": [...]} on one line.'}],
    }
    return (
        "Analyze the following conversation and extract information:\n```json\n"
        + _messages_json([*messages, reminder])
        + "\n```"
    )


def decision_user_prompt(old_memory: Sequence[Mapping[str, Any]], facts: Sequence[str]) -> str:
    payload = json.dumps({"old_memory": list(old_memory), "retrieved_facts": list(facts)}, ensure_ascii=False)
    return (
        "Analyze the following old memories and newly extracted facts, then make memory decisions:\n```json\n"
        + payload
        + "\n```"
    )


def summary_user_prompt(messages: Sequence[Mapping[str, Any]], words: int) -> str:
    return (
        f"Summarize the following conversation in no more than {words} words:\n```json\n{_messages_json(messages)}\n```"
    )


def custom_prompt_usable(prompt: str) -> bool:
    """ml-commons runs a strategy's own system prompt only if it asks for JSON facts."""
    return "facts" in prompt and "JSON" in prompt
