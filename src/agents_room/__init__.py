"""agents-room: coordination for coding agents on one machine (one SQLite file, no daemon)."""

__version__ = "0.1.0"
