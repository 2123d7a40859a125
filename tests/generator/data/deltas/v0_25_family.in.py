# SPDX-License-Identifier: Apache-2.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import Request


class Scheduler:
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        scheduled: list[Request] = []
        token_budget = self.max_num_scheduled_tokens
        input_budget, draft_slots = token_budget, 0

        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            if input_budget <= draft_slots:
                break
            # Paused streaming sessions still hold a model-runner request slot.
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            if num_running >= self.max_num_running_reqs:
                break

            request_queue = self._select_waiting_queue_for_scheduling()
            assert request_queue is not None

            scheduled.append(request_queue.pop_request())
            token_budget -= 1
        return SchedulerOutput(scheduled)
