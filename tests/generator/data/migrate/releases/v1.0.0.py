# A vLLM-like scheduler.py written for these tests: the WAITING loop peeks self.waiting itself
# (no request_queue), as vLLM did before 0.18.
from vllm.v1.core.sched.output import SchedulerOutput


class Scheduler:
    def schedule(self) -> SchedulerOutput:
        scheduled = []
        token_budget = self.max_num_scheduled_tokens
        while self.waiting and token_budget > 0:
            if len(self.running) == self.max_num_running_reqs:
                break

            request = self.waiting.peek_request()
            self.waiting.pop_request()
            scheduled.append(request)
            token_budget -= 1
        return SchedulerOutput(scheduled)
