"""Agentic memory from a plain asyncio program, mem0-style: no server, no HTTP.

    MEMORY_PLUGIN_AGENTIC_LLM_URL=https://api.openai.com/v1/chat/completions \\
    MEMORY_PLUGIN_AGENTIC_LLM_API_KEY=sk-... python examples/agentic_memory.py [DATA_DIR]

The LLM (any OpenAI-compatible chat completions endpoint) infers facts about a user from a
conversation; a search by meaning finds them again, and deleting the conversation forgets them.
Then the 2.12 memory API keeps a chat transcript, and the built-in model embeds two texts.
"""

import asyncio
import sys
import tempfile

from memory_plugin import MemoryPlugin, MemoryStrategy, Principal, load_settings


async def main(data_dir: str) -> None:
    settings = load_settings(data_dir=data_dir)
    bot = Principal(organization_id="acme", user_id="support-bot")
    async with MemoryPlugin.open(settings) as mp:
        if settings.agentic.llm.url:
            box = await mp.agentic.create_container(
                bot,
                "customers",
                llm_id="default",  # the LLM the settings name; or a model registered with mp.models
                strategies=[MemoryStrategy("semantic", namespace=["user_id"])],
                **mp.agentic.built_in_embedding(),
            )
            conversation = [
                {"role": "user", "content": "I moved to Lisbon last month, and I'm allergic to peanuts."},
                {"role": "assistant", "content": "Thanks, I've noted both."},
            ]
            added = await mp.agentic.add(bot, box, conversation, user_id="alice", infer=True)
            await mp.agentic.settled()  # the facts are inferred and embedded in the background
            for found in await mp.agentic.search(bot, box, "what should I not cook for her?", user_id="alice"):
                print(f"remembered {found.score:.3f}: {found.memory}")

            deleted = await mp.agentic.delete(bot, box, "working", added.working_memory_id)
            print(f"forgot {len(deleted.forgotten.long_term_deleted)} facts with the conversation")
        else:
            print("no LLM configured (MEMORY_PLUGIN_AGENTIC_LLM_URL): skipping inferred memories")

        transcript = await mp.memories.create_memory(bot, "Chat with Alice")
        await mp.memories.add_message(bot, transcript.conversation_id, input="Hi!", response="Hello Alice.")
        messages = await mp.memories.list_messages(bot, transcript.conversation_id)
        print(f"memory {transcript.conversation_id} has {len(messages.items)} message(s)")

        vectors = await mp.models.embed(bot, ["peanut allergy", "nut intolerance"])
        print(f"embedded {len(vectors)} texts into {len(vectors[0])} dimensions")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memory-plugin-example-")))
