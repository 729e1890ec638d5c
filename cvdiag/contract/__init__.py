"""The contract both sides share with emitters in other languages.

Envelope fields, boundaries, tiers, ids and time (``../shared/spec/wire-format.md``).
"""
