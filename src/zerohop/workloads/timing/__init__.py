"""When requests are due: rate curves (`rate_curve`), arrival processes (`arrivals`),
public traces (`traces`) and the turns of recorded conversations
(`conversation_sources`)."""
