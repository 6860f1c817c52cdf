"""Triage: remedies for a failing launch, pre-registered, launched and priced."""

__all__: list[str] = []
