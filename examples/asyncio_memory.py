"""Use memory_plugin in-process from a plain asyncio program: no server.

    python examples/asyncio_memory.py [DATA_DIR]

Stores a short support conversation, then finds it again by meaning.
"""

import asyncio
import sys
import tempfile

from memory_plugin import MemoryPlugin, Principal, load_settings


async def main(data_dir: str) -> None:
    settings = load_settings(data_dir=data_dir)
    caller = Principal(organization_id="acme", user_id="agent-7")
    async with MemoryPlugin.open(settings) as mp:
        conversation = await mp.create_conversation(caller, "Router trouble")
        await mp.add_interaction(
            caller,
            conversation.conversation_id,
            input="My internet drops every evening.",
            response="Let's restart the router and update its firmware.",
            origin="support-bot",
        )
        await mp.add_interaction(
            caller,
            conversation.conversation_id,
            input="It works now, thanks!",
            response="Glad to hear it.",
            origin="support-bot",
        )
        history = await mp.list_interactions(caller, conversation.conversation_id)
        print(f"conversation {conversation.conversation_id} has {len(history.items)} interactions")

        await mp.indexed()  # interactions become searchable records in the background
        result = await mp.search(caller, "wifi keeps disconnecting at night", "ai_pipeline_storage", top_k=3)
        for hit in result.hits:
            print(f"found {hit.score:.3f} {hit.record.metadata['conversation_id']}: {hit.text!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memory-plugin-example-")))
