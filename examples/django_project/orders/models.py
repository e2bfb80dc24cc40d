from django.db import models


class HandledMessage(models.Model):
    """One row per handler call that succeeded.

    Deliberately no unique constraint on ``msg_id``: the example's test counts
    rows per message to prove each was handled exactly once. A real app would
    make the key unique and skip duplicates (see "Idempotency" in the guide).
    """

    msg_id = models.CharField(max_length=200, db_index=True)
    subject = models.CharField(max_length=255)
    stream_seq = models.BigIntegerField()
    payload = models.BinaryField()
    handled_at = models.DateTimeField(auto_now_add=True)
