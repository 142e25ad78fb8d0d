"""The sequential references: every algorithm written plainly, one client at a time."""
