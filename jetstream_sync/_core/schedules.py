"""Message schedules held in a stream (ADR-51): list them, cancel one.
Publishing one is :meth:`~.jspublish.JsPublisher.publish_schedule`."""

from __future__ import annotations

from typing import List

from .. import errors, options
from ..models import Schedule
from .features import require
from .jsapi import JsApi


def list_schedules(api: JsApi, stream: str, subject: str = ">") -> List[Schedule]:
    """The schedules in ``stream`` on subjects matching ``subject``, by subject."""
    filt = options.subject(subject, what="subject", wildcards=True)
    require(api.connection, "message schedules", options.SCHEDULES_SINCE)
    info = api.stream_info(stream, subjects_filter=filt)
    found: List[Schedule] = []
    for subj in sorted(info.state.subjects or {}):
        try:
            msg = api.get_msg(stream, last_by_subject=subj)
        except errors.MsgNotFoundError:  # removed since the listing (fired, cancelled)
            continue
        schedule = Schedule.from_stored(msg)
        if schedule is not None:
            found.append(schedule)
    return found


def cancel_schedule(api: JsApi, stream: str, subject: str) -> bool:
    """Remove the schedule on ``subject`` (a purge of that subject, as ADR-51
    says); True if there was a message there."""
    subj = options.subject(subject, what="schedule subject")
    require(api.connection, "message schedules", options.SCHEDULES_SINCE)
    return api.purge_stream(stream, subj) > 0
