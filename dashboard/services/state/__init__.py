"""URL query parameters: frozen values (scheme, source, explorer view) to plain strings and
back, validated against fixed patterns and enums; nothing is evaluated or unpickled."""
