# SPDX-License-Identifier: Apache-2.0
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.request_queue import create_request_queue
from vllm.v1.request import Request


class Scheduler:
    def schedule(self) -> SchedulerOutput:
        # upstream comment, kept byte for byte
        scheduled: list[Request] = []
        token_budget = self.max_num_scheduled_tokens
        skipped_waiting_requests = create_request_queue(self.policy)

        if not scheduled:
            while self.waiting and token_budget > 0:
                if len(self.running) == self.max_num_running_reqs:
                    break

                request = self.waiting.peek_request()
                self.waiting.pop_request()
                scheduled.append(request)
                token_budget -= 1
        if skipped_waiting_requests:
            self.waiting.prepend_requests(skipped_waiting_requests)
        return SchedulerOutput(scheduled)
