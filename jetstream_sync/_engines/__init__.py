"""Loop-side consumer engines and the pull protocol as pure logic (layer 3)."""
