# SPDX-License-Identifier: Apache-2.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import Request


class Scheduler:
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        # upstream comment, kept byte for byte
        scheduled: list[Request] = []
        token_budget = self.max_num_scheduled_tokens

        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break

            request_queue = self._select_waiting_queue_for_scheduling()
            assert request_queue is not None

            request = request_queue.pop_request()
            scheduled.append(request)
            token_budget -= 1
        return SchedulerOutput(scheduled)
