"""The remoting protocol: a sans-IO codec (frames, headers, connections), an asyncio transport."""
