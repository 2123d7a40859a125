# A vLLM-like scheduler.py written for these tests: the cap counts streaming slots and stops at >=,
# as in 0.25-0.30.
from vllm.v1.core.sched.output import SchedulerOutput


class Scheduler:
    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while (self.waiting or self.skipped_waiting) and token_budget > 0:
            num_running = len(self.running) + self.num_waiting_for_streaming_input
            if num_running >= self.max_num_running_reqs:
                break

            request_queue = self._select_waiting_queue_for_scheduling()
            assert request_queue is not None

            request = request_queue.pop_request()
            if request.num_tokens > token_budget:
                self.skipped_waiting.add_request(request)
                continue
            scheduled.append(request)
            token_budget -= request.num_tokens
        return SchedulerOutput(scheduled)
