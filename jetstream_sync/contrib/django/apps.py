from django.apps import AppConfig


class JetStreamSyncConfig(AppConfig):
    name = "jetstream_sync.contrib.django"
    label = "jetstream_sync"
    verbose_name = "JetStream (jetstream_sync)"
