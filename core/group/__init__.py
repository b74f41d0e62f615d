"""Group mode: several assistants on one PostgreSQL database that know each other."""
