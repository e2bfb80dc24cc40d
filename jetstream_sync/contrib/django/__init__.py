"""Django integration: ``INSTALLED_APPS += ["jetstream_sync.contrib.django"]`` adds the
``manage.py jetstream_worker module:handler --stream S --consumer C`` command."""
