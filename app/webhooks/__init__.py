"""Webhooks: committed events of the selected types, POSTed signed (Standard Webhooks) to the
configured URLs, per session in order, retried with backoff, kept in a durable outbox."""
