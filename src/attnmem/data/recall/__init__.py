"""The `recall` family: seeded synthetic recall tasks (MQAR, selective copying, induction heads) as token sequences."""
