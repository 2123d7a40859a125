# SPDX-License-Identifier: Apache-2.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.request import Request


class Scheduler:
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        scheduled: list[Request] = []
        token_budget = self.max_num_scheduled_tokens
        input_budget, draft_slots = token_budget, 0

        while token_budget > 0:
            # Requests holding KV blocks are always drained first.
            request_queue = self.kv_holding_waiting or self.waiting
            if not request_queue or input_budget <= draft_slots:
                break
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            if num_running >= self.max_num_active_reqs:
                break

            scheduled.append(request_queue.pop_request())
            token_budget -= 1
        return SchedulerOutput(scheduled)
